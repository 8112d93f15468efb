"""The consumer core both facades compose (``Consumer``, ``aio.AsyncConsumer``).

``_arguments``: what the facades' arguments mean; ``_positions``: where each assigned
partition fetches from; ``_commits``: the consumer's own commits (before revoking,
auto-commit, at close); ``_core``: ``ConsumerCore``, the decisions that tie them
together (app work in the member's order, listeners, errors, close).
Imports ``_io``, the coordinator, config, listener and metrics; never a facade
(``_consumer``, ``aio``) or ``confluent_kafka``.
"""
