"""The agent and recipient JSON API (v1): thin views over the services."""
