"""Transcripts on disk and read back: the store (`store`), its files (`files`), writing
(`writer`) and reading (`reading`); what the last session left unfinished (`earlier`); the
timeline of a session's requests (`timeline`) and its figure (`timeline_figure`, needs
matplotlib).

May import: tasks and the leaves. Imported by: workers, batch, session.
"""
