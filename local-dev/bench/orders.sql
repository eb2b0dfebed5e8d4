-- The Postgres benchmarks' `orders` table, :rows rows (psql -v rows=N -f):
-- bigint key, user_id, numeric(10,2) amount, status, two timestamptz, and
-- a text note stored out of line uncompressed, so every 100th note (3,200
-- bytes) is TOASTed.
CREATE TABLE orders (
  id bigint PRIMARY KEY, user_id bigint NOT NULL, amount numeric(10,2) NOT NULL,
  status text NOT NULL, created_at timestamptz NOT NULL, updated_at timestamptz NOT NULL,
  note text);
ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL;
INSERT INTO orders
SELECT g, 1 + g % 100000, round((g % 100000) / 100.0, 2), (ARRAY['new','paid','shipped'])[1 + g % 3],
       '2026-01-01'::timestamptz + g * interval '1 second', '2026-01-01'::timestamptz + g * interval '1 second',
       CASE WHEN g % 100 = 0 THEN repeat(md5(g::text), 100) ELSE 'note ' || g END
  FROM generate_series(1, :rows) g;
VACUUM ANALYZE orders;
