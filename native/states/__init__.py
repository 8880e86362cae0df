"""KV states: prompt prefill reuse, the checkpoint store on disk, prefix states, idle release."""
