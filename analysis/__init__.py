"""PySpark analysis of streamlab result directories."""
