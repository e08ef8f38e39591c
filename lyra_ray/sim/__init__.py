"""The trace-driven simulator: the real SchedulerCore on a virtual clock."""
