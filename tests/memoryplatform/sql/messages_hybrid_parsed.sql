WITH visible AS MATERIALIZED (
    SELECT m.id, conversations_message_document(%(config)s::regconfig, m.content) AS vec FROM "conversations_message" m JOIN "conversations_conversation" c ON c.id = m.conversation_id
    WHERE (%(agent)s::text IS NULL OR c.group_id IS NULL OR EXISTS (
        SELECT FROM "apikeys_agentgroup_members" g WHERE g."agentgroup_id" = c.group_id AND g."agent_id" = %(agent)s)) AND (%(agent)s::text IS NULL OR (
            (m.channel <> 'memory' OR m.agent_id = %(agent)s)
            AND (NOT %(isolated)s OR m.channel <> 'history' OR m.role = 'user' OR m.agent_id IS NULL
                OR m.agent_id = %(agent)s)))
        AND (%(user)s::text IS NULL OR c.user_id = %(user)s)
        AND (%(author)s::text IS NULL OR m.agent_id = %(author)s)
        AND (%(channels)s::text[] IS NULL OR m.channel = ANY(%(channels)s::text[]))
        AND (%(conversation)s::uuid IS NULL OR m.conversation_id = %(conversation)s::uuid)
        AND NOT m.id = ANY(%(exclude)s::uuid[])
), sem AS (
    SELECT v.id, (1 - (e.embedding <=> %(vector)s::vector))::float8 AS score
    FROM visible v JOIN "conversations_messageembedding" e ON e."message_id" = v.id AND e.model = %(model)s
    ORDER BY e.embedding <=> %(vector)s::vector, v.id LIMIT %(depth)s
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
), features AS (
    SELECT c.id, x.cos, coalesce(f.score, 0)::float8 AS bm25
    FROM (SELECT id FROM sem UNION SELECT id FROM ft) c
    LEFT JOIN ft f ON f.id = c.id
    LEFT JOIN LATERAL (
        SELECT (1 - (e.embedding <=> %(vector)s::vector))::float8 AS cos FROM "conversations_messageembedding" e
        WHERE e."message_id" = c.id AND e.model = %(model)s
    ) x ON true
), ranked AS (SELECT id, cos, bm25, CASE WHEN cos IS NULL THEN (1 / (1 + exp(least(50, greatest(-50, -(%(cal_fulltext_bm25)s * ln(1 + bm25) + %(cal_fulltext_bias)s))))))::float8 ELSE (1 / (1 + exp(least(50, greatest(-50, -(%(cal_hybrid_cos)s * cos + %(cal_hybrid_bm25)s * ln(1 + bm25) + %(cal_hybrid_bias)s))))))::float8 END AS score FROM features)
SELECT id, score, cos, bm25 FROM ranked WHERE score >= %(min_score)s
ORDER BY score DESC, id LIMIT %(limit)s OFFSET %(offset)s
