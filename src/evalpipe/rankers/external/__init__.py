"""Retrievers that live outside evalpipe: a service behind HTTP, LangChain and LlamaIndex retriever
objects. Each answers with its own records, mapped to document / section / chunk by `records`."""
