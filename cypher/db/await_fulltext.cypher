// Wait until the eventually consistent full-text indexes (kope_text) hold every committed write.
CALL db.index.fulltext.awaitEventuallyConsistentIndexRefresh()
