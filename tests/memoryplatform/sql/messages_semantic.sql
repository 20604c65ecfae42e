WITH visible AS MATERIALIZED (
    SELECT m.id, m.search_vector AS vec FROM "conversations_message" m JOIN "conversations_conversation" c ON c.id = m.conversation_id
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
), features AS (SELECT id, score AS cos, 0::float8 AS bm25 FROM sem), ranked AS (SELECT id, cos, bm25, (1 / (1 + exp(least(50, greatest(-50, -(%(cal_semantic_cos)s * cos + %(cal_semantic_bias)s))))))::float8 AS score FROM features)
SELECT id, score, cos, bm25 FROM ranked WHERE score >= %(min_score)s
ORDER BY score DESC, id LIMIT %(limit)s OFFSET %(offset)s
