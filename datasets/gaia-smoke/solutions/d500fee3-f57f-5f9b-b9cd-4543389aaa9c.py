# Reference solution: distinct IPs with a 5xx response on 14 March 2023 (access log).
import re

pattern = re.compile(r'^(\S+) \S+ \S+ \[([^\]]+)\] "[^"]*" (\d{3}) (\S+)')
ips = set()
with open("web_access.log", encoding="utf-8") as fh:
    for line in fh:
        m = pattern.match(line)
        if not m:
            continue
        ip, ts, status = m.group(1), m.group(2), int(m.group(3))
        if ts.startswith("14/Mar/2023") and 500 <= status <= 599:
            ips.add(ip)
print(sorted(ips))
print(len(ips))
