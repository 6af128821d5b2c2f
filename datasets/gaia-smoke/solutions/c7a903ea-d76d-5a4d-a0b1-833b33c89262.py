# Reference solution: on-hand value of Fasteners across warehouses (json).
import json

with open("warehouse_inventory.json", encoding="utf-8") as fh:
    data = json.load(fh)
total = 0.0
for wh in data["warehouses"]:
    for item in wh["items"]:
        if item["category"] == "Fasteners":
            total += item["qty_on_hand"] * item["unit_cost_eur"]
print(total)
print(f"{total:.2f}")
