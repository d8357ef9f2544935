"""The public API, `Session`, and what only it uses: how its parts are made and joined
(`parts`), its options (`options`), settings changed live (`live_settings`), the compute
plane's settings (`compute_settings`), spending and the budget (`spending`), where a session
lives (`place`), what each agent is given to run with (`agent_setup`), the cost report
(`report`), and the parent's turns (`turns/`: the prompt path, one turn run to its end, slash
commands, the turn lock, the automatic answer to notifications, a turn's outcome). Each part
is given the parts it uses; none takes the session.

The top room of the runtime: it may import every other room; none imports it.
"""
