"""The consumer core both facades compose (``Consumer``, ``aio.AsyncConsumer``).

``_arguments``: what the facades' arguments mean; ``_positions``: where each assigned
partition fetches from; ``_core``: ``ConsumerCore``, the decisions (app work in the
member's order, listeners, commits before revoking, auto-commit, errors, close).
Imports ``_io``, the coordinator, config, listener and metrics; never a facade
(``_consumer``, ``aio``) or ``confluent_kafka``.
"""
