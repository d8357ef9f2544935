"""Text, no widgets: a task's numbers as one line (`task_line`), Markdown (`markdown`) and
output made safe to show (`safe_output`).

May import: the runtime's facade and messages_api only.
"""
