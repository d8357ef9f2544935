import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/**', 'node_modules/**', '.yarn/**', 'style/**', '*.config.*'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      eqeqeq: ['error', 'smart'],
      'no-restricted-properties': [
        'error',
        { property: 'innerHTML', message: 'Build DOM with textContent.' },
        { property: 'outerHTML', message: 'Build DOM with textContent.' }
      ]
    }
  }
);
