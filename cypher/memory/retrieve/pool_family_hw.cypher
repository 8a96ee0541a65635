// mode: read
// Relevance pool, same family, other operators, same hardware: candidates ranked by relevance, label bucket,
// d(v) * confidence and id, with the weights of kope/memory/ranking.py passed
// in as $w. Tiers are fetched in dominance order (kope/memory/retrieval.py);
// the pool_* statements share this ranking expression, and the test comparing
// them with ranking.rank_naively keeps them in step. $teams / $team_other: the
// source teams' weights (ranking.team_weight): weight 0 leaves a team's attempts out.
MATCH (d:Decision)
USING INDEX SEEK d:Decision(ns, family, hw_id)
WHERE d.ns = $ns AND d.family = $family AND d.hw_id = $hardware_id AND d.operator <> $operator AND coalesce($teams[d.team], $team_other) > 0
  AND NOT d.id IN $exclude
WITH d,
     CASE WHEN d.hw_id = $hardware_id THEN $w.same_hardware
          WHEN d.hw_class = $hardware_class THEN $w.same_class
          WHEN d.vendor = $vendor THEN $w.same_vendor
          ELSE 0.0 END
     + CASE WHEN d.layer = $layer THEN $w.layer_match ELSE 0.0 END
     + CASE WHEN d.error_kind = $error_kind THEN $w.error_match ELSE 0.0 END
     + CASE WHEN d.shape_sig = $shape_sig THEN $w.same_shape
            WHEN d.shape_class = $shape_class THEN $w.similar_shape ELSE 0.0 END AS within_tier,
     CASE d.label WHEN 'effective' THEN 0 WHEN 'partial' THEN 1 WHEN 'ineffective' THEN 2 ELSE 3 END AS label_rank,
     d.d * d.conf * coalesce($teams[d.team], $team_other) AS quality
WITH d, $w.same_family + within_tier AS relevance, label_rank, quality
ORDER BY relevance DESC, label_rank ASC, quality DESC, d.id ASC
LIMIT $limit
RETURN d.id AS id, d.parent_id AS parent_id, d.operator AS operator, d.family AS family,
       d.hw_id AS hw_id, d.hw_class AS hw_class, d.vendor AS vendor, d.layer AS layer,
       d.error_kind AS error_kind, d.label AS label, d.d AS d, d.conf AS conf,
       d.shape_sig AS shape_sig, d.shape_class AS shape_class, d.team AS team, relevance, label_rank, quality
