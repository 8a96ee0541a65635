// mode: read
// Hardware fingerprints by id (the cost model's hardware features).
UNWIND $uids AS u
MATCH (h:Hardware {uid: u})
RETURN h.id AS id, h.hw_class AS hw_class, h.vendor AS vendor, h.arch AS arch, h.cores AS cores,
       h.isa AS isa, h.caches_json AS caches_json
ORDER BY h.id
