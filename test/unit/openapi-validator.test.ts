import { loadApiDocument } from '../../src/http/openapi';

type SchemaValidatorClass = new (options: { version: string; validateApiSpec: boolean }) => { validate(doc: unknown): { errors: unknown[] } };
// The library's module, as the validator's start-up finds it once src/http/openapi is loaded.
const { OpenAPISchemaValidator } = require('express-openapi-validator/dist/framework/openapi.schema.validator') as { OpenAPISchemaValidator: SchemaValidatorClass };

describe("the validator's check of the document itself", () => {
  const doc = loadApiDocument();

  test('is compiled and run where the document is checked (tests): the document passes, a broken one does not', () => {
    const checking = new OpenAPISchemaValidator({ version: doc.openapi, validateApiSpec: true });
    expect(checking).toHaveProperty('validator', expect.any(Function)); // the compiled schema
    expect(checking.validate(doc).errors).toEqual([]);
    expect(checking.validate({ ...doc, paths: 'none' }).errors.length).toBeGreaterThan(0);
  });

  test('is not compiled where the check is off (production start-up), and cannot be called there', () => {
    const unused = new OpenAPISchemaValidator({ version: doc.openapi, validateApiSpec: false });
    expect(unused).not.toHaveProperty('validator');
    expect(() => unused.validate(doc)).toThrow('the document check is off');
  });
});
