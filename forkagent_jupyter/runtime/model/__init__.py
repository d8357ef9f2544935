"""Talking to the model: the client and its backends (`client`, `backends`, `credentials`,
`names`), streams (`stream`, `decoded_stream`), retries (`retry`), the offline model
(`offline`), the rate-limit pacer (`pacer`), the cost budget (`budget`), the request log
(`request_log`) and request timing (`timing`).

May import: tasks, messages_api and the leaves. Imported by: config, tools and everything
above.
"""
