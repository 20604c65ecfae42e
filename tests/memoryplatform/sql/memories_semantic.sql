WITH visible AS MATERIALIZED (
    SELECT id, updated_at FROM "usermemory_memoryentry"
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
), sem AS (
    SELECT v.id, (1 - (e.embedding <=> %(vector)s::vector))::float8 AS score
    FROM visible v JOIN "usermemory_entryembedding" e ON e."entry_id" = v.id AND e.model = %(model)s
    ORDER BY e.embedding <=> %(vector)s::vector, v.id LIMIT %(depth)s
), features AS (SELECT id, score AS cos, 0::float8 AS bm25 FROM sem), ranked AS (SELECT id, cos, bm25, (1 / (1 + exp(least(50, greatest(-50, -(%(cal_semantic_cos)s * cos + %(cal_semantic_bias)s))))))::float8 AS score FROM features)
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
