"""The conversation: the chat session logic, the list of chats, messages, Markdown, versions, export, trash,
sampling."""
