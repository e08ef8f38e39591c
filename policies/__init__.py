"""Allocation policies. Every policy implements :class:`policies.base.Policy`."""
