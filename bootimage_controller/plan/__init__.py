"""`plan`'s inputs (files, folders, a live cluster), their preparation, and its output."""
