-- Headless Neovim (0.7+) as a real infill-lsp client; run by tests/editors/test_lsp_nvim.py:
--
--   nvim --headless -u NONE -i NONE -c "luafile tests/editors/nvim/fill_action.lua" -c "cquit 3"
--
-- Environment: INFILL_PLUGIN (editors/nvim), INFILL_CMD and INFILL_INIT (JSON: the server
-- command and its initializationOptions), INFILL_FILE (a .py file), INFILL_RANGE
-- ("line:character-line:character", 0-based, UTF-16), INFILL_REPORT (a JSON report goes here),
-- INFILL_MODE (optional: the action's mode, "fill" by default; "fix" first waits for the
-- server's diagnostics and takes the quick fix).
--
-- Opens the file, attaches the client (the plugin), lists code actions for the range with
-- textDocument/codeAction, resolves the action of that mode with codeAction/resolve, applies the
-- workspace edit, writes the buffer and quits: exit status 0 on success, 1 on a failure (the
-- report says why), 3 if the script itself died before quitting.

local report = { steps = {} }

local function step(name)
  table.insert(report.steps, name)
end

local function write_report()
  local path = os.getenv('INFILL_REPORT')
  if path then
    local file = assert(io.open(path, 'w'))
    file:write(vim.fn.json_encode(report))
    file:close()
  end
end

local function check(condition, message)
  if not condition then
    error(message, 0)
  end
  return condition
end

local function main()
  local plugin = check(os.getenv('INFILL_PLUGIN'), 'INFILL_PLUGIN is not set')
  vim.opt.runtimepath:prepend(plugin)
  local cmd = vim.fn.json_decode(check(os.getenv('INFILL_CMD'), 'INFILL_CMD is not set'))
  local init_options = vim.fn.json_decode(os.getenv('INFILL_INIT') or '{}')
  local file = check(os.getenv('INFILL_FILE'), 'INFILL_FILE is not set')
  local l1, c1, l2, c2 = check(os.getenv('INFILL_RANGE'), 'INFILL_RANGE is not set'):match('^(%d+):(%d+)%-(%d+):(%d+)$')
  check(l1, 'INFILL_RANGE must be line:character-line:character')

  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local buf = vim.api.nvim_get_current_buf()
  local infill = require('infill')
  infill.setup { cmd = cmd, init_options = init_options }
  vim.cmd('set filetype=python') -- -u NONE: no filetype detection; this attaches the client
  local client_id = check(infill.client_id, 'the plugin did not start a client')
  local client = check(vim.lsp.get_client_by_id(client_id), 'no client ' .. client_id)
  check(vim.wait(60000, function() return client.initialized end, 20), 'the server never initialized')
  step('initialized')
  report.offset_encoding = client.offset_encoding
  local mode = os.getenv('INFILL_MODE') or 'fill'
  if mode == 'fix' then
    local published = vim.wait(30000, function() return #vim.diagnostic.get(buf) > 0 end, 20)
    check(published, 'no diagnostics were published for the broken file')
    report.published = {}
    for _, diagnostic in ipairs(vim.diagnostic.get(buf)) do
      table.insert(report.published, {
        lnum = diagnostic.lnum, col = diagnostic.col, end_lnum = diagnostic.end_lnum,
        end_col = diagnostic.end_col, message = diagnostic.message, source = diagnostic.source,
      })
    end
    step('diagnostics')
  end

  local params = {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = {
      start = { line = tonumber(l1), character = tonumber(c1) },
      ['end'] = { line = tonumber(l2), character = tonumber(c2) },
    },
    context = { diagnostics = {} },
  }
  local responses = vim.lsp.buf_request_sync(buf, 'textDocument/codeAction', params, 30000)
  local response = check(responses and responses[client_id], 'no answer to textDocument/codeAction')
  check(response.err == nil, 'textDocument/codeAction failed: ' .. vim.inspect(response.err))
  local actions = response.result or {}
  report.titles = {}
  local fill
  for _, action in ipairs(actions) do
    table.insert(report.titles, action.title)
    if fill == nil and type(action.data) == 'table' and action.data.mode == mode then
      fill = action
    end
  end
  check(fill, 'no "' .. mode .. '" action among ' .. #actions)
  report.kind = fill.kind
  check(fill.edit == nil, 'the listed action already had an edit')
  step('listed')

  local resolved, reason = client.request_sync('codeAction/resolve', fill, 120000, buf)
  check(resolved, 'codeAction/resolve got no answer: ' .. tostring(reason))
  check(resolved.err == nil, 'codeAction/resolve failed: ' .. vim.inspect(resolved.err))
  local edit = check(resolved.result and resolved.result.edit, 'the resolved action has no edit')
  step('resolved')

  vim.lsp.util.apply_workspace_edit(edit, client.offset_encoding)
  vim.cmd('write')
  step('written')
end

local ok, err = pcall(main)
report.ok = ok
if not ok then
  report.error = tostring(err)
  io.stderr:write('fill_action.lua: ' .. tostring(err) .. '\n')
end
pcall(write_report)
local clients = vim.lsp.get_active_clients()
for _, client in pairs(clients) do
  client.stop() -- shutdown, then exit
end
vim.wait(5000, function()
  for _, client in pairs(clients) do
    if not client.is_stopped() then
      return false
    end
  end
  return true
end, 20)
if ok then
  vim.cmd('qall!')
else
  vim.cmd('cquit 1')
end
