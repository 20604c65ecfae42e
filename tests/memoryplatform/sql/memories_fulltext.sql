WITH visible AS MATERIALIZED (
    SELECT id, updated_at, search_vector AS vec FROM "usermemory_memoryentry"
    WHERE user_id = %(user)s AND (
            visibility = 'global'
            OR (visibility = 'self' AND source_agent_id = %(agent)s)
            OR (visibility = 'group' AND id IN (
                SELECT entry_id FROM "usermemory_memoryentrygroup" WHERE user_id = %(user)s AND group_id IN (SELECT unnest(%(groups)s::text[]))
            ))
        ) AND (%(all_times)s OR (superseded_by_id IS NULL AND (valid_to IS NULL OR valid_to > now()))) AND (%(min_confidence)s::float8 IS NULL OR confidence >= %(min_confidence)s::float8) AND (%(categories)s::text[] IS NULL OR category = ANY(%(categories)s::text[]))
    AND (%(source)s::text IS NULL OR source = %(source)s::text)
    AND (%(author)s::text IS NULL OR source_agent_id = %(author)s::text)
    AND (%(updated_after)s::timestamptz IS NULL OR updated_at > %(updated_after)s::timestamptz)
    AND (%(key_prefix)s::text IS NULL OR starts_with(key, %(key_prefix)s::text))
    AND (%(only_visibility)s::text IS NULL OR visibility = %(only_visibility)s::text)
    AND (%(conditions)s::jsonb IS NULL OR NOT EXISTS (
        SELECT 1 FROM jsonb_array_elements(%(conditions)s::jsonb) AS c(cond)
        WHERE NOT COALESCE(CASE c.cond ->> 1
            WHEN 'eq' THEN value -> (c.cond ->> 0) = c.cond -> 2
            WHEN 'ne' THEN value -> (c.cond ->> 0) IS DISTINCT FROM c.cond -> 2
            ELSE jsonb_typeof(value -> (c.cond ->> 0)) = jsonb_typeof(c.cond -> 2) AND CASE c.cond ->> 1
                WHEN 'gt' THEN value -> (c.cond ->> 0) > c.cond -> 2
                WHEN 'gte' THEN value -> (c.cond ->> 0) >= c.cond -> 2
                WHEN 'lt' THEN value -> (c.cond ->> 0) < c.cond -> 2
                WHEN 'lte' THEN value -> (c.cond ->> 0) <= c.cond -> 2
            END
        END, false)
    ))
), terms AS MATERIALIZED (
    SELECT array_agg(lexeme) AS lexemes, string_agg(quote_literal(lexeme), ' | ')::tsquery AS tsq
    FROM unnest(to_tsvector(%(config)s::regconfig, %(query)s))
), stats AS MATERIALIZED (
    SELECT greatest(count(*), 20)::float8 AS n, avg(length(vec))::float8 AS avglen FROM visible
), hits AS MATERIALIZED (
    SELECT v.id, u.lexeme, cardinality(u.positions)::float8 AS tf, length(v.vec)::float8 AS len
    FROM visible v, terms t, unnest(ts_filter(setweight(v.vec, 'A', t.lexemes), '{a}')) u
    WHERE v.vec @@ t.tsq
), df AS MATERIALIZED (
    SELECT lexeme, count(*)::float8 AS df FROM hits GROUP BY lexeme
), ft AS (
    SELECT h.id, sum(
        ln(1 + (s.n - df.df + 0.5) / (df.df + 0.5)) * h.tf * 2.2
        / (h.tf + 1.2 * (0.25 + 0.75 * h.len / greatest(s.avglen, 1)))
    ) AS score
    FROM hits h JOIN df USING (lexeme), stats s
    GROUP BY h.id ORDER BY score DESC, h.id LIMIT %(depth)s
), features AS (SELECT id, NULL::float8 AS cos, score AS bm25 FROM ft), ranked AS (SELECT id, cos, bm25, (1 / (1 + exp(least(50, greatest(-50, -(%(cal_fulltext_bm25)s * ln(1 + bm25) + %(cal_fulltext_bias)s))))))::float8 AS score FROM features)
SELECT "usermemory_memoryentry"."id", "usermemory_memoryentry"."user_id", "usermemory_memoryentry"."key", "usermemory_memoryentry"."value", "usermemory_memoryentry"."category", "usermemory_memoryentry"."visibility", "usermemory_memoryentry"."source_agent_id", "usermemory_memoryentry"."group_ids", "usermemory_memoryentry"."source_conversation_id", CASE WHEN "usermemory_memoryentry".conflicted THEN EXISTS (
            SELECT 1 FROM "usermemory_memoryentry" AS other
            WHERE (other.key = "usermemory_memoryentry".key OR other.id = ANY("usermemory_memoryentry".meaning_conflicts))
                AND other.value_text <> "usermemory_memoryentry".value_text
                AND user_id = %(user)s AND (
            visibility = 'global'
            OR (visibility = 'self' AND source_agent_id = %(agent)s)
            OR (visibility = 'group' AND id IN (
                SELECT entry_id FROM "usermemory_memoryentrygroup" WHERE user_id = %(user)s AND group_id IN (SELECT unnest(%(groups)s::text[]))
            ))
        ) AND (%(all_times)s OR (superseded_by_id IS NULL AND (valid_to IS NULL OR valid_to > now())))
        ) ELSE false END, "usermemory_memoryentry"."meaning_conflicts", "usermemory_memoryentry"."access_count", "usermemory_memoryentry"."created_at", "usermemory_memoryentry"."updated_at", "usermemory_memoryentry"."last_accessed_at", "usermemory_memoryentry"."valid_from", "usermemory_memoryentry"."valid_to", "usermemory_memoryentry"."observed_at", "usermemory_memoryentry"."ttl_seconds", "usermemory_memoryentry"."superseded_by_id", "usermemory_memoryentry"."provenance", "usermemory_memoryentry"."confidence", "usermemory_memoryentry"."source", s.score, s.cos, s.bm25 FROM ranked s JOIN "usermemory_memoryentry" ON "usermemory_memoryentry".id = s.id
WHERE s.score >= %(min_score)s
ORDER BY s.score DESC, "usermemory_memoryentry".id LIMIT %(limit)s OFFSET %(offset)s
