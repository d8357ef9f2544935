"""The Messages API as data: one model of it that the runtime and the emulator share.

* `catalog`: the models (context window, output limit, minimum cacheable prefix, request
  rules) and their prices, one table;
* `usage`: the usage object and its cost;
* `tokens`: the deterministic tokenizer and token counts;
* `cache`: prompt-cache accounting on a clock (`VirtualClock`, `WallClock`);
* `validation`: the request rules, with the API's error messages;
* `errors`: error responses (`ApiError`, the error body);
* `offline_reply`: the deterministic reply of the offline model;
* `shapes`: messages and content blocks as kept and sent (`Message`, `Block`, `JSON`).

It imports neither `runtime` nor `emulator`; both build on it, and neither imports the other
(a test checks the imports).
"""
