"""Who spoke when: the speaker embedding model, its clips and turns, the clustering."""
