"""The parent conversation's turns: the prompt path (`parent_turns`), one turn run to its end
(`turn_runner`) and what it starts with (`turn_setup`), slash commands and skills
(`commands`), the parent's turn lock and its priorities (`turn_lock`), where a queued command
goes and the automatic answer to notifications (`responder`), the default prompt (`prompts`)
and a turn's outcome (`turn_result`).

Part of the session room: it imports the rooms below the session and the session's own
modules (agent setup, options, place, spending), never `session.py` itself.
"""
