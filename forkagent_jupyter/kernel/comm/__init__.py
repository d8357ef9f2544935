"""The wire to the JupyterLab extension: its typed messages (`protocol`, mirrored by
labextension/src/protocol.ts) and the comm bridge that validates and broadcasts them
(`bridge`).

May import: the runtime's facade and messages_api only.
"""
