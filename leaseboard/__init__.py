"""Leaseboard: renewable, fenced leases on work for autonomous agents."""
