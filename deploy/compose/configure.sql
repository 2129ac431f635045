-- The quick start's configuration (compose.yaml, service "configure"): a table of photos,
-- Ollama's llava as an OpenAI-compatible model, and a rule captioning every photo.
-- Idempotent: compose may run it again.
CREATE TABLE IF NOT EXISTS public.photos (id int PRIMARY KEY, img bytea);
INSERT INTO pgimageai.models (name, provider, base_url, model, options)
VALUES ('llava', 'openai', 'http://ollama:11434/v1', 'llava', '{"max_tokens": 80, "temperature": 0, "timeout": "300s"}')
ON CONFLICT (name) DO NOTHING;
INSERT INTO pgimageai.rules (name, source_table, image_column, function, model, prompt, target_table, target_column)
VALUES ('caption', 'public.photos', 'img', 'AI_IMAGE_COMPLETE', 'llava',
        'Describe this photo in one sentence.', 'public.photo_captions', 'caption')
ON CONFLICT (name) DO NOTHING;
