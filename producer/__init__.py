"""Kafka producer and result collector for streamlab experiments."""
