"""The public API, `Session`, and what only it uses: how its parts are made and joined
(`parts`), its options (`options`), settings changed live (`live_settings`), the compute
plane's settings (`compute_settings`), spending and the budget (`spending`), the parent's
turns (`parent_turns`), one turn run to its end (`turn_runner`) and what it starts with
(`turn_setup`), slash commands (`commands`), where a session lives (`place`), the parent's
turn lock (`turn_lock`), where a queued command goes and the automatic answer to
notifications (`responder`), what each agent is given to run with (`agent_setup`), the
default prompt (`prompts`), a turn's outcome (`turn_result`) and the cost report (`report`).
Each part is given the parts it uses; none takes the session.

The top room of the runtime: it may import every other room; none imports it.
"""
