"""The oracle agents: an instance solved from its own reference actions, which proves the dataset, image and judge."""
