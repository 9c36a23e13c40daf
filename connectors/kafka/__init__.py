"""The Kafka consumer daemon: wire format, per-partition tasks, checkpoints, clients, bundled broker."""
