"""Approvals in the notebook: the permission policy whose prompts are widgets
(`widget_policy`) and questions asked on the kernel's stdin in a console (`terminal`).

May import: host, frontend, cards, comm, parents and the runtime's facade.
"""
