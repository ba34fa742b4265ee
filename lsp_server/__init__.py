"""Language server for infill (see issue: infill-lsp)."""
