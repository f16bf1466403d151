"""What the gathering blocks share: the SSRF-guarded fetcher, main-text extraction from HTML, text extraction
per upload format, safe ZIP handling, the BM25 index of a canvas's files, search providers, YouTube
transcripts, and table and list parsing. Each module imports its heavy libraries only when called."""
