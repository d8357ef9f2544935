"""Fan-out through the Message Batches API: the batch run and its resume (`fan_out`), the
client that sends and polls (`client`), the results table (`results`).

May import: workers, model, tasks, transcripts and the leaves. Imported by: session.
"""
