/** Which skill a chat turn applies: the message's `skillId`, or its `model: "skill:<id>"`. */
import { errors } from '../../platform/errors';
import { SKILL_MODEL_PREFIX } from '../skills/service';

/** The skill a request asks for and the request field naming it, and the model it asks for besides (a `skill:` model is none). */
export function skillAsked(input: { skillId?: string; model?: string }): {
  skill: { id: string; field: 'skillId' | 'model' } | null;
  model: string | undefined;
} {
  const fromModel = input.model?.startsWith(SKILL_MODEL_PREFIX) ? input.model.slice(SKILL_MODEL_PREFIX.length) : undefined;
  if (fromModel === undefined)
    return { skill: input.skillId === undefined ? null : { id: input.skillId, field: 'skillId' }, model: input.model };
  if (input.skillId !== undefined && input.skillId !== fromModel)
    throw errors.invalidRequest('skillId and model name two skills: give one of them.', [
      { path: '/body/model', message: `names the skill ${fromModel}, not the skillId ${input.skillId}` },
    ]);
  return { skill: { id: fromModel, field: input.skillId !== undefined ? 'skillId' : 'model' }, model: undefined };
}
