"""Speed-ups that keep results identical: the chunked loss, host-side token counting, packed attention."""
