import { defineConfig } from 'vite';

// No @vitejs/plugin-react: esbuild compiles TSX with the automatic runtime,
// which is all this page needs (no fast refresh in a page that is built once).
export default defineConfig({
  base: './',
  esbuild: { jsx: 'automatic' },
  build: { target: 'es2022', sourcemap: true },
  preview: { host: '127.0.0.1', strictPort: true },
});
