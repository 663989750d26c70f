"""Dynamic batching: the scheduler, its policies and its clock."""
