"""What pages and tables are drawn with: KaTeX for every page, the Markdown table cell."""
