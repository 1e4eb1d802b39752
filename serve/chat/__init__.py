"""Chat: OpenAI's /v1/chat/completions and Cohere's /v2/chat on the served language models, chat answered by a
flow (rag) and over a task's results, and answers grounded on the documents a request sends."""
