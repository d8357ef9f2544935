"""One task vocabulary: the task rows and their state machine (`registry`), the one shape of an
ended task on its way out (`snapshot`) and the notification format and queue
(`notifications`).

May import: executors, messages_api and the leaves. Imported by: model, transcripts and
everything above.
"""
