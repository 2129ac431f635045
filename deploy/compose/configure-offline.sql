-- The offline Compose file's configuration (compose.offline.yaml, service "configure"): a
-- table of photos, the built-in local provider (no network, no key) as the model, and two
-- rules: a caption and an embedding of every photo. Idempotent: compose may run it again.
CREATE TABLE IF NOT EXISTS public.photos (id int PRIMARY KEY, img bytea);
INSERT INTO pgimageai.models (name, provider, model)
VALUES ('local', 'local', 'any')
ON CONFLICT (name) DO NOTHING;
INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'local',
        'Describe this photo.', 'public.photo_captions', 'caption'),
       ('embed', 'public.photos', 'img', 'AI_IMAGE_EMBED', 'local',
        NULL, 'public.photo_embeddings', 'embedding')
ON CONFLICT (name) DO NOTHING;
