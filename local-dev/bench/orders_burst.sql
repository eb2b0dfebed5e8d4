-- A streaming burst on `orders` (orders.sql): 200 transactions of 1,000
-- updates each, over the first 200,000 keys.
DO $$ BEGIN
  FOR b IN 0..199 LOOP
    UPDATE orders SET amount = amount + 0.01, updated_at = now() WHERE id > b * 1000 AND id <= (b + 1) * 1000;
    COMMIT;
  END LOOP;
END $$;
