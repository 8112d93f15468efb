"""A multi-broker Kafka-protocol test cluster with Kafka's replication model.

``_model`` is the sans-I/O state machine (brokers, partitions, replicas, ISR, leaders,
reassignment); ``_handlers`` turns wire requests into model commands and model state
into responses; ``_server`` serves them on loopback ports, one per broker.
"""
