"""Queries as long as MAX_QUERY_CHARS allows that cost the embedder very differently (issue 53, finding 12):
English prose (226 tokens to the local model; 387 in capitals), Chinese (642) and 500 U+FCDF (1,000
characters once normalized: 1,006 tokens)."""

from memoryplatform.text import MAX_QUERY_CHARS

LIGATURES = "\ufcdf" * 500  # ARABIC LIGATURE YEH WITH HEH: 2 characters once normalized, 1,000 in all
CHINESE = (
    "用户去年春天搬到了里斯本，在市立医院当护士。她喜欢喝咖啡，周末常去海边散步，"
    "也在学习葡萄牙语，想知道附近有没有适合孩子的学校。" * 30
)[:MAX_QUERY_CHARS]
ENGLISH = (
    "What do we know about where the user lives and works, which city they moved to last spring, whether "
    "they still rent the flat near the river or bought the house their sister mentioned, what their job at "
    "the hospital involves, which shifts they prefer, how they get to work when the trains are on strike, "
    "what they like to eat on a weekday evening, which foods they cannot have because of the allergy they "
    "told us about in March, whether they are vegetarian now or only avoid red meat, what they asked us to "
    "remember about their children's schools, the dentist's appointment, the car insurance renewal and the "
    "trip to the coast in August, which hotels they booked, how much they wanted to spend, who is travelling "
    "with them, and what they said they would like us to remind them of before they leave? Also, did they "
    "ever tell us their partner's name, their football club, or the language they are learning, "
    "and which of those facts should be kept from the other agents that help them plan a weekly shop?"
)
