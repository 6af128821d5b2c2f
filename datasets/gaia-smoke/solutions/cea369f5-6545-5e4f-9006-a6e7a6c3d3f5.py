# Reference solution: sum of primes in [2000, 2100] with a prime digit sum (no attachment).
def is_prime(n):
    if n < 2:
        return False
    k = 2
    while k * k <= n:
        if n % k == 0:
            return False
        k += 1
    return True


picked = [p for p in range(2000, 2101) if is_prime(p) and is_prime(sum(map(int, str(p))))]
print(picked)
print(sum(picked))
