import { createRoot } from 'react-dom/client';
import { App } from './App';
import { loadConfig } from './config';
import './style.css';

const root = createRoot(document.getElementById('root')!);
loadConfig().then(
  (config) => root.render(<App config={config} />),
  (e: unknown) => root.render(<p className="fatal">{String(e)}</p>),
);
